"""The use cases both faces call: profile, fit, decide, tune, apply / roll back / restore, and the
--json contract."""
