"""The apply step: carry out a plan (``decide/plan.py``), one step for a checkout, a
resume, a switch and an export, whichever writer the plan chose (``apply/run.py``).

In order: the journal of an interrupted run's completed entries (a fresh checkout and a
resume); the writer: pcheckout's engine (``apply/byengine.py``: a switch's fetch and
deletes first, then the files, then the index from the writers' stat data) or git's own
checkout (``apply/bygit.py``, the one module that runs git's writer: git writes the files
and a scratch index, renamed over the index through the lock); HEAD, as ``git checkout
REV`` moves it; the journal removed; the ``Result`` (``apply/report.py``).
"""
