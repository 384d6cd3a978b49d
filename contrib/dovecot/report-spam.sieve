# A message moved or copied into Junk: learn it as spam (spamnb-learn).
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

if environment :matches "imap.user" "*" {
  set "username" "${1}";
}

pipe :copy "spamnb-learn" ["spam", "${username}"];
