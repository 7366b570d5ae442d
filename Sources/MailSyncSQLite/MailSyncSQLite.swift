// MailSyncSQLite: not yet implemented.
