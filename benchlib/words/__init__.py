"""Sentences for readers: the words the pages say about findings, kept apart from the findings.

:mod:`benchlib.stats` and the views return numbers, intervals, verdict codes and flags; the modules here
turn them into sentences (one module per subject), with the study's vocabulary from
:mod:`benchlib.tables`. Nothing under :mod:`benchlib.stats` imports from here.
"""
