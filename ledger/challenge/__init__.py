"""Bot-protection challenge and block pages (issue 29 item 5): the signatures data file and its matcher."""
