/// A LIST or LSUB as RFC 9051 and LIST-EXTENDED (RFC 5258) write it:
/// `LIST [(selection options)] reference (pattern | (patterns…)) [RETURN (return options)]`.
struct ListRequest {
    var tag: String
    var lsub: Bool
    /// The patterns, each with the reference before it.
    var patterns: [String]
    /// `SUBSCRIBED` asked for, as a selection or a return option: each mailbox is answered `\Subscribed`.
    var tellsSubscribed: Bool
    /// `SPECIAL-USE` as a selection option (RFC 6154): only the mailboxes with a special use.
    var specialUseOnly: Bool

    init?(tag: String, lsub: Bool, arguments: [IMAPToken]) {
        var arguments = arguments[...]
        var selection: Set<String> = []
        if !lsub, case .list(let options) = arguments.first {
            selection = Set(options.compactMap { $0.text?.uppercased() })
            arguments = arguments.dropFirst()
        }
        guard arguments.count >= 2, let reference = arguments.popFirst()?.text, let pattern = arguments.popFirst()
        else { return nil }
        let patterns: [String]
        switch pattern {
        case .list(let list): patterns = list.compactMap(\.text)
        default: patterns = [pattern.text ?? ""]
        }
        var returning: Set<String> = []
        if arguments.first?.text?.uppercased() == "RETURN", case .list(let options)? = arguments.dropFirst().first {
            returning = Set(options.compactMap { $0.text?.uppercased() })
        }
        self.tag = tag
        self.lsub = lsub
        self.patterns = patterns.map { $0.isEmpty ? "" : reference + $0 }
        tellsSubscribed = !lsub && (selection.contains("SUBSCRIBED") || returning.contains("SUBSCRIBED"))
        specialUseOnly = selection.contains("SPECIAL-USE")
    }
}
