// SQLiteKit: not yet implemented.
