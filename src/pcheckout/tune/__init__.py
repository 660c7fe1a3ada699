"""``pcheckout tune``: measure a mount once, and remember what was measured.

``workload`` measures the worker count (the knee), ``writers`` times pcheckout's engine against
git's own checkout there, ``gitconfig`` writes plain git's per-mount config, and ``command``
runs the command (a typed request in, a record out).  What a checkout reads back lives in
:mod:`pcheckout.plan.tunecache`; a checkout never imports this package.
"""
