/*
 * benchlib._bins: cut fio json+ latency histograms ("bins" maps) out of a document's text.
 *
 * A heavy json+ file is mostly bins: one "<bucket value>" : <count> entry per
 * bucket that saw I/O. Parsed into Python dicts and converted back to arrays,
 * they cost more than the rest of ingest together (bench/results.md). This
 * module scans the text once: every map that fio 3.x writes as
 * `"bins" : { "<digits>" : <digits>, ... }` is replaced by its index
 * (`"bins" : 0`, `"bins" : 1`, ...) and its keys and counts are returned as
 * arrays of int64, so orjson parses only the rest.
 *
 * cut_bins(text: str) -> (stripped: str, keys: bytes, counts: bytes, sizes: list[int]) | None
 * bucket_index(values: int64 buffer) -> bytes of int32, fio's plat_val_to_idx for each value
 *
 * keys and counts hold native int64 values, map after map; sizes says how
 * many entries each map has. None means "not for this fast path": no bins
 * map, a map in another layout (fio 2.x's FIO_IO_U_PLAT_* entries), a
 * number of more than 18 digits, text that is not one byte per character, or
 * anything malformed. The caller then parses the text as it is, so a damaged
 * file meets the JSON parser's own error.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define OPEN "\"bins\" : {"
#define OPEN_LEN 10
#define MAX_DIGITS 18

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} buffer;

static int reserve(buffer *b, Py_ssize_t more) {
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL)
        return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static int append(buffer *b, const void *bytes, Py_ssize_t n) {
    if (reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, bytes, (size_t)n);
    b->len += n;
    return 0;
}

/* JSON's whitespace: fio indents every bin's line, so this is most of what the scan reads. */
static const unsigned char SPACE[256] = {[' '] = 1, ['\n'] = 1, ['\r'] = 1, ['\t'] = 1};

static Py_ssize_t skip_space(const char *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && SPACE[(unsigned char)s[i]])
        i++;
    return i;
}

/* Digits at s[i:]: the index after them, or -1 when there are none, too many or a leading zero. */
static Py_ssize_t number(const char *s, Py_ssize_t i, Py_ssize_t n, int64_t *out) {
    Py_ssize_t start = i;
    if (i + 1 < n && s[i] == '0' && s[i + 1] >= '0' && s[i + 1] <= '9')
        return -1; /* fio writes none; a JSON number has none */
    int64_t value = 0;
    unsigned digit;
    while (i < n && (digit = (unsigned)(unsigned char)s[i] - '0') <= 9) {
        if (i - start == MAX_DIGITS)
            return -1;
        value = value * 10 + digit;
        i++;
    }
    if (i == start)
        return -1;
    *out = value;
    return i;
}

enum { MALFORMED = -1, NO_MEMORY = -2 };

/* One map's entries, s[i] being just after its '{': the index after its '}', or MALFORMED / NO_MEMORY. */
static Py_ssize_t parse_map(const char *s, Py_ssize_t i, Py_ssize_t n, buffer *keys, buffer *counts,
                            Py_ssize_t *entries) {
    *entries = 0;
    i = skip_space(s, i, n);
    if (i < n && s[i] == '}')
        return i + 1;
    for (;;) {
        int64_t key, count;
        if (i >= n || s[i] != '"')
            return MALFORMED;
        i = number(s, i + 1, n, &key);
        if (i < 0 || i >= n || s[i] != '"')
            return MALFORMED;
        i = skip_space(s, i + 1, n);
        if (i >= n || s[i] != ':')
            return MALFORMED;
        i = skip_space(s, i + 1, n);
        i = number(s, i, n, &count);
        if (i < 0)
            return MALFORMED;
        if (append(keys, &key, sizeof key) < 0 || append(counts, &count, sizeof count) < 0)
            return NO_MEMORY;
        (*entries)++;
        i = skip_space(s, i, n);
        if (i < n && s[i] == ',') {
            i = skip_space(s, i + 1, n);
            continue;
        }
        if (i < n && s[i] == '}')
            return i + 1;
        return MALFORMED;
    }
}

static PyObject *cut_bins(PyObject *module, PyObject *text) {
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "cut_bins() takes a str");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) /* a no-op from Python 3.12 on */
        return NULL;
#endif
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND)
        Py_RETURN_NONE;
    const char *s = (const char *)PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);

    buffer out = {0}, keys = {0}, counts = {0};
    PyObject *sizes = PyList_New(0), *result = NULL;
    if (sizes == NULL)
        return NULL;
    Py_ssize_t position = 0, maps = 0;
    int ok = 1;
    while (ok) {
        const char *found = memmem(s + position, (size_t)(n - position), OPEN, OPEN_LEN);
        if (found == NULL)
            break;
        Py_ssize_t opened = found - s, entries;
        Py_ssize_t end = parse_map(s, opened + OPEN_LEN, n, &keys, &counts, &entries);
        if (end == NO_MEMORY) {
            PyErr_NoMemory();
            goto done;
        }
        if (end == MALFORMED) {
            ok = 0;
            break;
        }
        char index[32];
        int written = snprintf(index, sizeof index, "\"bins\" : %zd", maps);
        PyObject *size = PyLong_FromSsize_t(entries);
        if (size == NULL || PyList_Append(sizes, size) < 0) {
            Py_XDECREF(size);
            goto done;
        }
        Py_DECREF(size);
        if (append(&out, s + position, opened - position) < 0 || append(&out, index, written) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        position = end;
        maps++;
    }
    if (!ok || maps == 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (append(&out, s + position, n - position) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *stripped = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, out.data, out.len);
    PyObject *key_bytes = PyBytes_FromStringAndSize(keys.data, keys.len);
    PyObject *count_bytes = PyBytes_FromStringAndSize(counts.data, counts.len);
    if (stripped != NULL && key_bytes != NULL && count_bytes != NULL)
        result = PyTuple_Pack(4, stripped, key_bytes, count_bytes, sizes);
    Py_XDECREF(stripped);
    Py_XDECREF(key_bytes);
    Py_XDECREF(count_bytes);
done:
    PyMem_Free(out.data);
    PyMem_Free(keys.data);
    PyMem_Free(counts.data);
    Py_DECREF(sizes);
    return result;
}

/* fio's plat_val_to_idx (FIO_IO_U_PLAT_BITS = 6) for int64 values, as benchlib.sources.fio_json.bucket_index. */
static PyObject *bucket_index(PyObject *module, PyObject *values) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(values, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (view.itemsize != 8 || view.format == NULL || (strcmp(view.format, "l") != 0 && strcmp(view.format, "q") != 0)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "bucket_index() takes a contiguous buffer of int64");
        return NULL;
    }
    Py_ssize_t n = view.len / 8;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    if (out != NULL) {
        const int64_t *in = (const int64_t *)view.buf;
        int32_t *index = (int32_t *)PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t value = in[i];
            if (value < 128) {
                index[i] = (int32_t)value;
                continue;
            }
            int error_bits = 63 - __builtin_clzll((unsigned long long)value) - 6;
            index[i] = (int32_t)(((int64_t)(error_bits + 1) << 6) + ((value >> error_bits) & 63));
        }
    }
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"cut_bins", cut_bins, METH_O,
     "cut_bins(text) -> (stripped, keys, counts, sizes) or None: fio json+ bins maps cut out of a document."},
    {"bucket_index", bucket_index, METH_O, "bucket_index(int64 buffer) -> bytes of int32: fio's plat_val_to_idx."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_bins", "fio json+ bins maps cut out of a document's text.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__bins(void) { return PyModule_Create(&module); }
