// The wire model the store shares with its clients (MailboxID, MailboxRole, MailAddress, MailAttachment) comes with
// this module.
@_exported import MailModel
