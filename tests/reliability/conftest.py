"""The reliability suite: fault injection, generated inputs, secrets, concurrency, data safety.

Its counts line (`reliability: 1234 cases, 40 faults injected, 57 files scanned`) is printed by hooks in
tests/conftest.py: under pytest-xdist only the root conftest is loaded on the controller.
"""
