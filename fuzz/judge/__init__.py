"""Whether thunderfx computed what eager did: the oracle's failure classes and triage, and
`check_spec`, one spec end to end (build, run, judge).
Takes a spec; gives an `Outcome` with its verdict."""
