"""benchlib: reproducible storage benchmarking for vSphere, from raw tool output to checked claims."""

__version__ = "0.1.0"
