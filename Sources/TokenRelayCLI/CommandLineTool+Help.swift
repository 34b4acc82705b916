import Foundation
import TokenRelayBase

/// `--help` on every command and sub-command (usage on standard output, exit 0), and unknown
/// options and arguments refused before a command runs (usage on standard error, exit 2).
extension CommandLineTool {
    package struct CommandHelp: Sendable {
        /// The command words, e.g. `["accounts", "list"]`.
        package let path: [String]
        package let usage: String
        /// Options accepted; nil when the command checks its own.
        package let options: Set<String>?
        /// The options among `options` that take a value.
        package let valued: Set<String>
        /// How many arguments besides options it takes (`accounts show ACCOUNT_ID`: one); nil
        /// for a group whose next word is its sub-command, which the dispatcher reads.
        package let arguments: Int?

        package init(_ path: [String], _ usage: String, options: Set<String>? = [], valued: Set<String> = [], arguments: Int? = 0) {
            self.path = path
            self.usage = usage
            self.options = options.map { $0.union(valued) }
            self.valued = valued
            self.arguments = arguments
        }
    }

    package static let commandHelp: [CommandHelp] = [
        CommandHelp(["serve"], "usage: token-relay serve\n  Serves HTTP on TOKENRELAY_LISTEN; runs the keep-alive and webhook jobs."),
        CommandHelp(["migrate"], "usage: token-relay migrate\n  Applies pending migrations (TOKENRELAY_DATABASE_URL) and exits."),
        CommandHelp(
            ["check-config"], "usage: token-relay check-config\n  Validates the configuration; prints {\"status\":\"ok\"} or names the bad setting (exit 2)."),
        CommandHelp(["healthcheck"], "usage: token-relay healthcheck\n  Exits 0 when the local /healthz passes, else 1."),
        CommandHelp(
            ["api-keys"], "usage: token-relay api-keys create --name NAME --permissions p1,p2 [--tenants t1,t2] [--scopes p1,p2] | list | revoke KEY_ID",
            arguments: nil),
        CommandHelp(
            ["api-keys", "create"],
            "usage: token-relay api-keys create --name NAME --permissions p1,p2 [--tenants t1,t2] [--scopes \"User.*,https://vault.azure.net/*\"]\n"
                + "  Prints the new key once, as JSON (api_key). --tenants and --scopes limit what the key may touch.\n"
                + "  --permissions, --tenants and --scopes list each value once, separated by single commas.",
            valued: ["--name", "--permissions", "--tenants", "--scopes"]),
        CommandHelp(["api-keys", "list"], "usage: token-relay api-keys list\n  Prints one JSON object per key (never the secret)."),
        CommandHelp(["api-keys", "revoke"], "usage: token-relay api-keys revoke KEY_ID", arguments: 1),
        CommandHelp(
            ["encryption"], "usage: token-relay encryption generate-key [--id ID] | rotate [--batch-size N] | rewrap [--batch-size N] | create-kek",
            options: nil),
        CommandHelp(
            ["encryption", "generate-key"],
            "usage: token-relay encryption generate-key [--id ID]\n  Prints a key ring entry id:base64key; ID is 1-32 characters of [A-Za-z0-9_-].",
            valued: ["--id"]),
        CommandHelp(
            ["encryption", "rotate"],
            """
            usage: token-relay encryption rotate [--batch-size N]
              Online: rewraps the tenants' data keys under the first key-encryption key and moves rows still sealed
              under a ring key to their tenant's data key, N rows per batch (default 500); progress on standard error.
            """,
            valued: ["--batch-size"]),
        CommandHelp(
            ["encryption", "rewrap"],
            """
            usage: token-relay encryption rewrap [--batch-size N]
              Wraps every tenant's data key under the first key-encryption key (rows untouched) and prints
              {"kek_id", "data_keys_rewrapped", "data_keys_failed", "data_keys_remaining", "seconds"}; progress on standard error.
            """,
            valued: ["--batch-size"]),
        CommandHelp(
            ["encryption", "create-kek"],
            "usage: token-relay encryption create-kek\n  Makes the AES key TOKENRELAY_PKCS11_KEY_LABEL names inside the HSM token (TOKENRELAY_PKCS11_*)."),
        CommandHelp(
            ["accounts"],
            "usage: token-relay accounts list [--limit N] [--cursor C] [--username U] [--tenant-id T] | show ACCOUNT_ID | delete ACCOUNT_ID", arguments: nil),
        CommandHelp(
            ["accounts", "list"],
            """
            usage: token-relay accounts list [--limit N] [--cursor C] [--username U] [--tenant-id T]
              Prints {"accounts": [...], "next_cursor": ...} as GET /v1/accounts does (limit 1-200, default 50;
              an empty --username or --tenant-id is the filter not given).
            """,
            valued: ["--limit", "--cursor", "--username", "--tenant-id"]),
        CommandHelp(
            ["accounts", "show"],
            """
            usage: token-relay accounts show ACCOUNT_ID
              Prints the account object with its token issuance counts and refresh_token: generation, rotated_at,
              family_id, lease ({"state": "held", "expires_at"} or null) and lineage, the chain's last links newest
              first (fingerprints, never a token); refresh_token is null without one. Exit 1 when there is no account.
            """,
            arguments: 1),
        CommandHelp(
            ["accounts", "delete"],
            """
            usage: token-relay accounts delete ACCOUNT_ID
              Signs the account out of TokenRelay (nothing is revoked at Microsoft): deletes it and its tokens,
              writes an audit row and an account.deleted event; prints {"account_id", "deleted"}.
            """,
            arguments: 1),
        CommandHelp(
            ["tenants"], "usage: token-relay tenants suspend TENANT_ID | resume TENANT_ID | forget TENANT_ID --yes|--dry-run | list [--limit N] [--cursor C]",
            arguments: nil),
        CommandHelp(
            ["tenants", "suspend"],
            """
            usage: token-relay tenants suspend TENANT_ID
              Suspends the tenant (a GUID): its accounts, app and on-behalf-of tokens are refused with 403
              tenant_suspended on every replica within 2 s; nothing is deleted. Audited (actor cli). Prints the
              tenant as GET /v1/tenants shows it, with "changed" (false when it already was suspended).
            """,
            arguments: 1),
        CommandHelp(
            ["tenants", "resume"],
            """
            usage: token-relay tenants resume TENANT_ID
              Resumes the tenant: served again with the refresh tokens it had, no sign-in needed. Audited (actor cli).
              Prints the tenant with "changed" (false when it was not suspended).
            """,
            arguments: 1),
        CommandHelp(
            ["tenants", "forget"],
            """
            usage: token-relay tenants forget TENANT_ID --yes | --dry-run
              Offboards the tenant for good (crypto-shredding): deletes every account of it (realm, home tenant or
              tenant profile) and every token of its realm, then destroys its data key, so that nothing of it left
              in the database or a later dump opens again. Every replica drops the key within 2 s. Not reversible:
              --yes is required. Audited (actor cli). Prints {"tenant_id", "accounts_deleted",
              "token_rows_deleted", "data_key_destroyed"}; progress (accounts deleted of how many, time left) on
              standard error. Dumps taken before keep the wrapped key: rewrap under a new key-encryption key and
              destroy the old one to make them unreadable too (ADR 0017).
              --dry-run deletes nothing and prints what would go: {"dry_run": true, "tenant_id",
              "accounts_to_delete", "account_ids", "token_rows_to_delete", "token_rows", "data_key_to_destroy"}.
              Give one of --yes and --dry-run, not both.
            """,
            options: ["--yes", "--dry-run"], arguments: 1),
        CommandHelp(
            ["tenants", "list"],
            """
            usage: token-relay tenants list [--limit N] [--cursor C]
              Prints {"tenants": [...], "next_cursor": ...} as GET /v1/tenants does (limit 1-200, default 50).
            """,
            valued: ["--limit", "--cursor"]),
        CommandHelp(["audit"], "usage: token-relay audit export --since TIME [--until TIME] [--actor A] [--action X] [--account-id ID]", options: nil),
        CommandHelp(
            ["audit", "export"],
            """
            usage: token-relay audit export --since TIME [--until TIME] [--actor A] [--action X] [--account-id ID]
              Prints the audit rows that occurred at or after --since (and before --until; RFC 3339 times such as
              2026-12-05T00:00:00Z) as JSON lines, oldest first, each the object GET /v1/audit lists; progress on standard error.
            """,
            valued: ["--since", "--until", "--actor", "--action", "--account-id"]),
        CommandHelp(
            ["keepalive"],
            """
            usage: token-relay keepalive --once
              Runs one refresh-token keep-alive pass (accounts idle TOKENRELAY_KEEPALIVE_AFTER_DAYS days), which first
              deletes events older than TOKENRELAY_EVENTS_RETENTION_DAYS and audit rows older than
              TOKENRELAY_AUDIT_RETENTION_DAYS, and prints
              {"ran", "refreshed", "failed", "deferred", "pruned_events", "pruned_audit"}; progress (accounts refreshed of how many,
              time left at TOKENRELAY_KEEPALIVE_MAX_PER_MINUTE) on standard error.
            """,
            options: ["--once"]),
        CommandHelp(
            ["bench-seed"], benchSeedUsage, valued: ["--accounts", "--batch", "--second-tenant", "--scopes", "--valid-seconds", "--data-keys"]),
    ]

    /// Answers `--help` and refuses unknown options, an option given twice (the first of two was
    /// taken and the second ignored: `--tenants A --tenants B` made a key for A) and an option
    /// without its value (`--name $UNSET --permissions admin` took `--permissions` as the name and
    /// made an admin key), before any command runs.
    /// - Returns: the exit status when the command must not run, else nil.
    package static func preflight(_ arguments: [String]) -> Int32? {
        guard let help = commandHelp.filter({ arguments.starts(with: $0.path) }).max(by: { $0.path.count < $1.path.count }) else {
            return nil  // an unknown command: the dispatcher says so
        }
        if arguments.contains("--help") || arguments.contains("-h") {
            print(help.usage)
            return 0
        }
        guard let options = help.options else { return nil }
        var index = help.path.count
        var seen: Set<String> = []
        var taken = 0
        while index < arguments.count {
            let argument = arguments[index]
            if !argument.hasPrefix("-") {
                // An argument no command reads was ignored: `accounts list foo` listed every account.
                taken += 1
                if let allowed = help.arguments, taken > allowed { return usageError("unexpected argument '\(argument.prefix(80))'", help: help.path) }
            } else {
                guard options.contains(argument) else { return usageError("unknown option '\(argument)'", help: help.path) }
                guard seen.insert(argument).inserted else { return usageError("'\(argument)' is given twice; give it once", help: help.path) }
                if help.valued.contains(argument) {
                    guard index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") else {
                        return usageError("'\(argument)' needs a value", help: help.path)
                    }
                    index += 1
                }
            }
            index += 1
        }
        return nil
    }

    /// Writes `message` and the command's usage to standard error; returns 2.
    package static func usageError(_ message: String, help path: [String]) -> Int32 {
        let usage = commandHelp.first { $0.path == path }?.usage ?? "usage: token-relay --help"
        FileHandle.standardError.write(Data("token-relay: \(message)\n\(usage)\n".utf8))
        return 2
    }
}
