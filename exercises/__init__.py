"""The learner's files: stubs of the concept files' key functions (see exercises/README.md).

Fill a body in, then check it: python -m pytest tests/test_exercises.py --mine -k <name>
"""
