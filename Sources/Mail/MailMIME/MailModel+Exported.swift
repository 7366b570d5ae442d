// The wire model a parsed message is given in (MailAddress, MailAttachment) comes with this module.
@_exported import MailModel
