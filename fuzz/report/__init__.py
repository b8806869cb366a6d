"""What a campaign leaves: failure folders (spec, repro.py, failure ids, confirmation), the run folder,
the campaign's statistics, summary.json and its text, report.html, and merged fleets.
Takes outcomes and failures; gives files a user and a later run read."""
