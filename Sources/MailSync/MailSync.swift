// MailSync: not yet implemented.
