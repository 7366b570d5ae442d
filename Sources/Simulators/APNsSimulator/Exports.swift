// The process settings apns-sim shares with fcm-sim live in SimulatorSupport; importing APNsSimulator keeps
// bringing them along, as before they moved. (The clock is Durations' `WallClock`, imported where it is used.)
@_exported import SimulatorSupport
