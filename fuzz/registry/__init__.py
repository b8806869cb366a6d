"""The known thunder bugs: each entry's claim (class, trigger, recorded signature and bands), whether a
failure is one of them, and the entry folders' files (spec, repro, reproductions).
Takes a spec and its failure; gives the known issue it reproduces, or how it differs."""
