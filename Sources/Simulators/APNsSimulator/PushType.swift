/// The `apns-push-type` values APNs accepts.
public enum PushType: String, Sendable, CaseIterable, Codable {
    /// A user-visible notification (alert, sound or badge).
    case alert
    /// A content-available-only notification that wakes the app in the background.
    case background
    /// A notification about the device's location (Location Push Service extension).
    case location
    /// A VoIP call notification (topic suffix `.voip`).
    case voip
    /// A watchOS complication update (topic suffix `.complication`).
    case complication
    /// A File Provider change signal (topic suffix `.pushkit.fileprovider`).
    case fileprovider
    /// A device-management wake-up.
    case mdm
    /// A Live Activity update (topic suffix `.push-type.liveactivity`).
    case liveactivity
    /// A Push to Talk notification (topic suffix `.voip-ptt`).
    case pushtotalk
    /// A widget reload request (topic suffix `.push-type.widgets`).
    case widgets
    /// A Control Center control reload request (topic suffix `.push-type.controls`).
    case controls

    /// The topic suffix this push type requires, if any.
    public var topicSuffix: String? {
        switch self {
        case .alert, .background, .mdm: return nil
        case .location: return ".location-query"
        case .voip: return ".voip"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .pushtotalk: return ".voip-ptt"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        }
    }

    /// The largest payload APNs accepts for this push type, in bytes.
    public var maximumPayloadSize: Int { self == .voip ? 5120 : 4096 }
}
