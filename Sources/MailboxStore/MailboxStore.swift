// MailboxStore: not yet implemented.
