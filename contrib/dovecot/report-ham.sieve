# A message moved or copied out of Junk: learn it as ham (spamnb's ledger
# moves it from spam to ham), unless it goes to Trash (or stays in Junk).
require ["vnd.dovecot.pipe", "copy", "imapsieve", "environment", "variables"];

if environment :matches "imap.mailbox" "*" {
  set "mailbox" "${1}";
}

if anyof (string "${mailbox}" "Trash", string "${mailbox}" "Junk") {
  stop;
}

if environment :matches "imap.user" "*" {
  set "username" "${1}";
}

pipe :copy "spamnb-learn" ["ham", "${username}"];
