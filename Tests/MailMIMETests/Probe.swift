import MailMIME
import Testing

@Test func probe() {
    let raw = Array(
        "From: =?UTF-8?Q?J=C3=BCrgen?= <j@example.test>\r\nTo: a@example.test\r\nSubject: hi\r\n\r\nbody\r\n".utf8)
    let m = MIMEMessage.parse(raw)
    #expect(m.from.first?.name == "Jürgen")
    let c = MIMEMessage.compose(
        from: "x@y.test", to: "alice", subject: "Grüße", body: "Schön\n", date: 0, messageID: "a@b")
    print(String(decoding: c, as: UTF8.self))
}
