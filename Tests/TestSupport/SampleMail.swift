/// Mail as an MTA hands it over, for the tests that ingest it (over LMTP, or straight into the store).
public enum SampleMail {
    /// A multipart/mixed message: a multipart/alternative (text/plain and text/html) and a base64 PDF attachment,
    /// `report.pdf`; the From name (`Rémi Doe, Jr.`) and the Subject (`Grüße aus Köln with a file`) are RFC 2047
    /// encoded words, Q and B.
    public static let multipartWithAttachment = """
        From: =?UTF-8?Q?R=C3=A9mi_Doe=2C_Jr=2E?= <remi@example.test>\r
        To: alice@example.test\r
        Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?= =?UTF-8?B?IGF1cyBLw7Zsbg==?= with a file\r
        Message-ID: <mime-1@example.test>\r
        MIME-Version: 1.0\r
        Content-Type: multipart/mixed; boundary="outer"\r
        \r
        --outer\r
        Content-Type: multipart/alternative; boundary="inner"\r
        \r
        --inner\r
        Content-Type: text/plain; charset=utf-8\r
        \r
        Plain text body\r
        --inner\r
        Content-Type: text/html; charset=utf-8\r
        \r
        <p>HTML body</p>\r
        --inner--\r
        --outer\r
        Content-Type: application/pdf; name="report.pdf"\r
        Content-Disposition: attachment; filename="report.pdf"\r
        Content-Transfer-Encoding: base64\r
        \r
        JVBERi0xLjQKJcfsj6IKdGVzdAo=\r
        --outer--\r

        """
}
