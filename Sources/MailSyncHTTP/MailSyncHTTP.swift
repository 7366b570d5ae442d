// MailSyncHTTP: not yet implemented.
