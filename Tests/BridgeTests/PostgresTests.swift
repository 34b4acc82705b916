import Foundation
import PostgresBridge
import Synchronization
import Testing
import TokenRelayTesting

/// Real PostgreSQL (scripts/pg-local or TOKENRELAY_TEST_DATABASE_URL); each test gets its own database.
@Suite("PostgreSQL bridge")
struct PostgresTests {
    @Test("every parameter kind round-trips")
    func parameterRoundTrip() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_params") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            let text = "it's \"quoted\" \\ ünïcødé 🎉; DROP TABLE x; --"
            let bytes: [UInt8] = [0x00, 0x01, 0xFF, 0x00, 0x5C, 0x78, 0x00]
            let row = try await pool.withConnection { connection in
                try connection.execute(
                    """
                    CREATE TABLE kinds (t text, b bytea, i int8, f bool, n text);
                    CREATE TABLE IF NOT EXISTS kinds (t text);
                    """)
                let inserted = try connection.query(
                    "INSERT INTO kinds (t, b, i, f, n) VALUES ($1, $2, $3, $4, $5)",
                    [.text(text), .bytes(bytes), .int(-9_007_199_254_740_993), .bool(true), .null])
                #expect(inserted.affectedRows == 1)
                return try connection.query("SELECT t, b, i, f, n FROM kinds").rows.first
            }
            let found = try #require(row)
            #expect(found.string("t") == text)
            #expect(found.bytes("b") == bytes)
            #expect(found.int("i") == -9_007_199_254_740_993)
            #expect(found.bool("f") == true)
            #expect(found.isNull("n"))
            #expect(found.string("n") == nil)
            #expect(!found.isNull("t"))
            #expect(found.string(at: 0) == text)
            #expect(found.columnNames == ["t", "b", "i", "f", "n"])
        }
    }

    @Test("a column is read by name in a narrow and in a wide result alike: the first of a repeated name, nil for an unknown one")
    func columnsByName() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_columns") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            // Narrow results are searched in order, wide ones through an index: both read alike.
            let wide = (1...20).map { "\($0) AS c\($0)" }.joined(separator: ", ")
            let (narrow, wider) = try await pool.withConnection { connection in
                (
                    try connection.query("SELECT 1 AS a, 2 AS b, 3 AS a, NULL::text AS n").rows.first,
                    try connection.query("SELECT 0 AS a, \(wide), 21 AS a, 22 AS c20").rows.first
                )
            }
            for row in [try #require(narrow), try #require(wider)] {
                #expect(row.int("a") == (row.columnNames.count > 16 ? 0 : 1))
                #expect(row.string("missing") == nil && row.isNull("missing") && row.isNull("n"))
            }
            #expect(narrow?.int("b") == 2)
            #expect(wider?.int("c20") == 20 && wider?.int("c1") == 1 && wider?.columnNames.count == 23)
        }
    }

    @Test("parameters bind where the server infers the type, and empty bytes are not NULL")
    func inferredTypes() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_infer") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            let result = try await pool.withConnection { connection in
                try connection.query(
                    "SELECT $1::uuid AS u, $2::jsonb ->> 'a' AS j, $3::bytea AS e, $4::int4 + 1 AS n, $5 AS f",
                    [
                        .text("6f1c2a2e-0000-4000-8000-000000000001"), .text(#"{"a":"b"}"#), .bytes([]), .int(41),
                        .bool(false),
                    ])
            }
            let row = try #require(result.rows.first)
            #expect(result.columns == ["u", "j", "e", "n", "f"])
            #expect(row.string("u") == "6f1c2a2e-0000-4000-8000-000000000001")
            #expect(row.string("j") == "b")
            #expect(row.bytes("e") == [])
            #expect(row.int("n") == 42)
            #expect(row.bool("f") == false)
            #expect(row.string("missing") == nil)
        }
    }

    @Test("a transaction commits, and rolls back when its body throws")
    func transactions() async throws {
        struct Abort: Error {}
        try await TestPostgres.withFreshDatabase(named: "pg_tx") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            try await pool.withConnection { connection in
                try connection.execute("CREATE TABLE items (id int8 PRIMARY KEY)")
                try connection.transaction { try $0.query("INSERT INTO items VALUES ($1)", [.int(1)]) }
                #expect(throws: Abort.self) {
                    try connection.transaction { connection in
                        try connection.query("INSERT INTO items VALUES ($1)", [.int(2)])
                        throw Abort()
                    }
                }
                // A failed statement whose error the body swallowed: COMMIT becomes ROLLBACK.
                let swallowed = #expect(throws: PostgresError.self) {
                    try connection.transaction { connection in
                        try connection.query("INSERT INTO items VALUES ($1)", [.int(3)])
                        _ = try? connection.query("INSERT INTO items VALUES ($1)", [.int(1)])
                    }
                }
                #expect(swallowed?.code == .transactionRolledBack)
                let ids = try connection.query("SELECT id FROM items ORDER BY id").rows.map { $0.int("id") }
                #expect(ids == [1])
            }
        }
    }

    @Test("a unique violation reports SQLSTATE 23505 and a safe description")
    func uniqueViolation() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_unique") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withConnection { connection in
                    try connection.execute("CREATE TABLE names (name text PRIMARY KEY)")
                    try connection.query("INSERT INTO names VALUES ($1)", [.text("secret-value")])
                    try connection.query("INSERT INTO names VALUES ($1)", [.text("secret-value")])
                }
            }
            #expect(error?.sqlState == "23505")
            #expect(error?.isUniqueViolation == true)
            #expect(error?.isConnectionFailure == false)
            #expect(error?.code == .queryFailed)
            #expect(error?.label == "query_failed")
            #expect(error?.description.contains("secret-value") == false)
            #expect(error?.description.contains("PQexecParams") == true)
            // The pool's connection is still usable after a statement error.
            let one = try await pool.withConnection { try $0.query("SELECT 1 AS one").rows.first?.int("one") }
            #expect(one == 1)
        }
    }

    @Test("20 concurrent jobs on a pool of 2 all complete, at most 2 at a time")
    func concurrency() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_pool") { url in
            let pool = PostgresPool(url: url, size: 2)
            defer { pool.close() }
            let results = try await withThrowingTaskGroup(of: (Int64, Int).self) { group in
                for value in 0..<20 {
                    group.addTask {
                        try await pool.withConnection { connection in
                            let row = try connection.query(
                                "SELECT $1::int8 * 2 AS doubled, pg_sleep(0.02)", [.int(Int64(value))])
                            return (row.rows.first?.int("doubled") ?? -1, pool.statistics.inUse)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.map(\.0).sorted() == (0..<20).map { Int64($0) * 2 })
            #expect(results.allSatisfy { $0.1 >= 1 && $0.1 <= 2 })
            let statistics = pool.statistics
            #expect(statistics.size == 2 && statistics.inUse == 0 && statistics.waiting == 0)
            // At most 18 of 20 jobs found both workers busy; with 20 ms each, most did.
            #expect((1...18).contains(statistics.totalWaits))
            // Two connections served everything.
            let backends = try await pool.withConnection { connection in
                try connection.query(
                    "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'tokenrelay'"
                ).rows.first?.int("n")
            }
            #expect(backends == 2)
        }
    }

    @Test("an unreachable server is a connection failure, reported quickly")
    func connectionFailure() async throws {
        let pool = PostgresPool(url: "postgresql://tokenrelay:hunter2secret@127.0.0.1:1/none", size: 1)
        defer { pool.close() }
        let started = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withConnection { try $0.query("SELECT 1") }
        }
        // Refused at once, not a connect_timeout waited out (the elapsed time alone is no proof on a
        // loaded machine: the suite's tasks share two cores).
        #expect(error?.serverMessage?.contains("refused") == true, "\(error?.serverMessage ?? "")")
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(error?.isConnectionFailure == true)
        #expect(error?.label == "connection_failure")
        #expect(error?.outcomeUnknown == false, "nothing was sent")
        #expect(error?.description.contains("hunter2secret") == false)
        #expect(error?.debugDescription.contains("hunter2secret") == false)
    }

    @Test("a terminated backend is replaced on the next use of the same pool")
    func recoversFromTerminatedBackend() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_recover") { url in
            let pool = PostgresPool(url: url, size: 1)
            let killer = PostgresPool(url: url, size: 1)
            defer {
                pool.close()
                killer.close()
            }
            let firstPID = try #require(
                try await pool.withConnection { try $0.query("SELECT pg_backend_pid() AS pid").rows.first?.int("pid") })
            try await killer.withConnection { connection in
                let terminated = try connection.query(
                    "SELECT pg_terminate_backend($1::int4, 5000) AS ok", [.int(firstPID)])
                #expect(terminated.rows.first?.bool("ok") == true)
            }
            let secondPID = try await pool.withConnection {
                try $0.query("SELECT pg_backend_pid() AS pid").rows.first?.int("pid")
            }
            #expect(secondPID != nil)
            #expect(secondPID != firstPID)
        }
    }

    @Test("a connection lost mid-statement reports a connection failure, and the next job reconnects")
    func connectionLostDuringStatement() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_lost") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withConnection { connection in
                    try connection.query("SELECT pg_terminate_backend(pg_backend_pid())")
                }
            }
            #expect(error?.isConnectionFailure == true)
            #expect(error?.outcomeUnknown == true, "a statement whose connection died under it may have run")
            let one = try await pool.withConnection { try $0.query("SELECT 1 AS one").rows.first?.int("one") }
            #expect(one == 1)
        }
    }

    /// What a session left on a standby or a demoted primary sees after a failover (PostgreSQL
    /// docs, Appendix A: 25006 read_only_sql_transaction). A session made read-only stands in
    /// for it here; `FailoverTests` has the real standby.
    @Test("a write refused as read-only (25006) is a connection failure, in or out of a transaction, and the session is replaced")
    func readOnlyServerReplacesTheConnection() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_readonly") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            try await pool.withConnection { try $0.execute("CREATE TABLE written (n int8)") }
            for inTransaction in [false, true] {
                let readOnlyPID = try await pool.withConnection { connection in
                    try connection.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                    return try connection.query("SELECT pg_backend_pid() AS pid").rows.first?.int("pid")
                }
                let error = await #expect(throws: PostgresError.self) {
                    try await pool.withConnection { connection in
                        let insert = { (connection: PostgresConnection) in try connection.query("INSERT INTO written VALUES (1)") }
                        if inTransaction { try connection.transaction(insert) } else { _ = try insert(connection) }
                    }
                }
                #expect(error?.sqlState == "25006")
                #expect(error?.isConnectionFailure == true, "25006 was \(error?.label ?? "-"), so the read-only session would be kept")
                #expect(error?.outcomeUnknown == false, "a statement refused as read-only wrote nothing")
                // The next job runs on a new session, which takes the write.
                let next = try await pool.withConnection { connection in
                    try connection.query("INSERT INTO written VALUES (2)")
                    return try connection.query("SELECT pg_backend_pid() AS pid").rows.first?.int("pid")
                }
                #expect(next != nil && next != readOnlyPID)
            }
        }
    }

    @Test("a closed pool refuses new work")
    func closedPool() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_closed") { url in
            let pool = PostgresPool(url: url, size: 1)
            pool.close()
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withConnection { try $0.query("SELECT 1") }
            }
            #expect(error?.code == .poolClosed)
        }
    }

    @Test("close() returns after the job in flight has finished and the workers have stopped (a CLI exits right after it)")
    func closeWaitsForTheWorkers() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_close_wait") { url in
            let pool = PostgresPool(url: url, size: 2)
            let finished = Mutex(false)
            let started = Mutex(false)
            let job = Task {
                try await pool.withConnection { connection in
                    started.withLock { $0 = true }
                    _ = try connection.query("SELECT pg_sleep(0.4)")
                    finished.withLock { $0 = true }
                }
            }
            while !started.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
            pool.close()
            #expect(finished.withLock { $0 }, "close() returned while a worker still ran its job")
            try await job.value
        }
    }

    @Test("bytea text is decoded from hex; other text is not bytes")
    func byteaDecoding() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_bytea") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            let row = try await pool.withConnection { connection in
                try connection.query(#"SELECT decode('00ff10ab', 'hex') AS b, 'abc' AS t, '\x0' AS odd"#).rows.first
            }
            #expect(row?.bytes("b") == [0x00, 0xFF, 0x10, 0xAB])
            #expect(row?.string("b") == #"\x00ff10ab"#)
            #expect(row?.bytes("t") == nil)
            #expect(row?.bytes("odd") == nil)
        }
    }
}

extension PostgresTests {
    @Test("a text parameter containing NUL is refused instead of cut short")
    func nulInText() async throws {
        try await TestPostgres.withFreshDatabase(named: "pg_nul") { url in
            let pool = PostgresPool(url: url, size: 1)
            defer { pool.close() }
            let error = await #expect(throws: PostgresError.self) {
                try await pool.withConnection { try $0.query("SELECT $1 AS t", [.text("a\u{0}b")]) }
            }
            #expect(error?.code == .invalidParameter)
        }
    }

    @Test("a fresh database is empty and its own; dropDatabase removes it")
    func freshDatabases() async throws {
        let first = try await TestPostgres.freshDatabase(named: "Pg Fresh-Name")
        let second = try await TestPostgres.freshDatabase(named: "Pg Fresh-Name")
        #expect(first != second)
        let pool = PostgresPool(url: first, size: 1)
        let name = try await pool.withConnection { connection in
            let tables = try connection.query("SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public'")
            #expect(tables.rows.first?.int("n") == 0)
            return try connection.query("SELECT current_database() AS d").rows.first?.string("d")
        }
        pool.close()
        #expect(name?.hasPrefix("pg_fresh_name_t") == true)
        try await TestPostgres.dropDatabaseOrThrow(url: first)
        try await TestPostgres.dropDatabaseOrThrow(url: second)
        let gone = PostgresPool(url: first, size: 1)
        defer { gone.close() }
        let error = await #expect(throws: PostgresError.self) {
            try await gone.withConnection { try $0.query("SELECT 1") }
        }
        #expect(error?.isConnectionFailure == true)  // 3D000 on connect: the database is gone
    }

    @Test("a test's own connection that cannot be made names libpq's reason, after three attempts")
    func unreachableTestDatabaseSaysWhy() async throws {
        let url = try await TestPostgres.freshDatabase(named: "pg_unreachable")
        try await TestPostgres.dropDatabaseOrThrow(url: url)
        let started = Date()
        let error = await #expect(throws: TestDatabaseUnreachable.self) {
            try await TestPostgres.withConnection(url: url) { try $0.query("SELECT 1") }
        }
        #expect(error?.description.contains(#"FATAL:  database "pg_unreachable_t"#) == true, "\(String(describing: error))")
        #expect(error?.description.contains("does not exist") == true, "\(String(describing: error))")
        #expect(Date().timeIntervalSince(started) >= 1.0)  // two pauses of 0.5 s between the three attempts
    }
}
