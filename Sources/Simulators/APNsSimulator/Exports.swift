// The clock and process settings apns-sim shares with fcm-sim live in SimulatorSupport; importing
// APNsSimulator keeps bringing them along, as before they moved.
@_exported import SimulatorSupport
