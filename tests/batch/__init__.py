"""A package, so that its test modules may share a name with another folder's
(test_online here and in tests/service) without clashing on import."""
