"""limno's benchmark suite: limno side by side with its peers, on the same data, in one run.

Run ``make bench`` (or ``python -m bench``) for the full suite and ``make bench-quick``
(``python -m bench --quick``) for a small smoke run. See ``bench/README-section.md``.
"""
