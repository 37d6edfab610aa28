"""One screen per view: fleet, inbox, run detail, audit, help."""
