import Foundation

/// What build this binary is, for `version` and `releaseId` in `/healthz` and `/readyz`
/// (behaviour §8; draft-inadarei-api-health-check-06 §3.2 "version" and §3.3 "releaseId").
///
/// The commit comes from `Operations/release-id`, written by `scripts/release-id` at `make build`
/// and compiled in (`.embedInCode` in Package.swift, SwiftPM 5.9+): nothing beside the binary
/// is needed once it is installed. Built without git (a tarball, the container context), the
/// file says `unknown` and `releaseId` is `version+unknown`.
package enum BuildInfo {
    /// The public release number (semantic versioning).
    package static let version = "0.1.0"

    /// The commit the binary was built from: 12 hex digits, `.dirty` appended when tracked files
    /// differed from it, or `unknown`.
    package static let commit: String = {
        let text = String(decoding: PackageResources.release_id, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "unknown" : text
    }()

    /// `version+commit`, the commit as semantic-versioning build metadata (semver.org §10).
    package static let releaseId = version + "+" + commit
}
