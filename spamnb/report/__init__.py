"""What a verdict looks like outside: the lines ``spamnb classify`` writes
(:mod:`spamnb.report.lines`) and the X-Spam-* header fields and report the
server and ``classify --sa-headers`` add (:mod:`spamnb.report.headers`)."""
