//! loom models of chronopool live in `tests/`; this library is empty.
