// MailboxService: not yet implemented.
