/// The outcome of one statement: its rows (text format) and how many rows it touched.
public struct PostgresResult: Sendable {
    /// The returned rows, in server order; empty for commands that return none.
    public let rows: [PostgresRow]
    /// Rows inserted, updated, deleted, selected, … (`PQcmdTuples`); 0 when the command reports none.
    public let affectedRows: Int
    /// The result's column names, in order.
    public let columns: [String]

    init(rows: [PostgresRow], affectedRows: Int, columns: [String]) {
        self.rows = rows
        self.affectedRows = affectedRows
        self.columns = columns
    }

    /// The first row, or nil when there is none.
    public var first: PostgresRow? { rows.first }
}
