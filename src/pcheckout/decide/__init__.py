"""The decide step: each command's plan (``decide/plan.py``), before anything is written."""
