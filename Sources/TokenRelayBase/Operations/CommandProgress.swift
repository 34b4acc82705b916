import Foundation
import IdentityCore
import Synchronization

/// Progress of a long command on standard error (standard output keeps the one JSON result):
/// a bar redrawn in place when standard error is a terminal, else one JSON object per line
/// (`{"event":"progress","command","phase","done","total","percent","elapsed_s","eta_s"}`),
/// with counts and an estimate of the time left from the phase's pace so far (behaviour §8.5).
/// A line at each phase's start and end, and in between at most one a second (ten a
/// second for the bar).
package final class CommandProgress: ProgressSink {
    package enum Style: Sendable, Equatable {
        /// One line redrawn in place (`\r`), for a person at a terminal.
        case bar
        /// One JSON object per line, for logs and scripts.
        case jsonLines
    }

    private struct State {
        var phase = ""
        var total: Int?
        var done = 0
        var started = 0.0
        var lastWritten = -Double.infinity
        var open = false
    }

    package let command: String
    package let style: Style
    private let write: @Sendable (String) -> Void
    private let clock: @Sendable () -> Double
    private let state = Mutex(State())

    /// - Parameters:
    ///   - style: default a bar when standard error is a terminal, else JSON lines.
    ///   - write: where the text goes (default standard error, unbuffered).
    ///   - clock: seconds, monotonic (injected by tests).
    package init(
        command: String, style: Style? = nil,
        write: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) },
        clock: @escaping @Sendable () -> Double = { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
    ) {
        self.command = command
        self.style = style ?? (isatty(STDERR_FILENO) != 0 ? .bar : .jsonLines)
        self.write = write
        self.clock = clock
    }

    package func begin(_ phase: String, total: Int?) {
        let now = clock()
        emit { state in
            // A phase not ended says so first.
            let previous = state.open ? text(state, now, final: true) : ""
            state = State(phase: phase, total: total.map { max(0, $0) }, done: 0, started: now, lastWritten: now, open: true)
            return previous + text(state, now, final: false)
        }
    }

    package func advance(by count: Int) {
        guard count > 0 else { return }
        let now = clock()
        emit { state in
            guard state.open else { return nil }
            state.done += count
            let interval = style == .bar ? 0.1 : 1
            guard now - state.lastWritten >= interval || state.done == state.total else { return nil }
            state.lastWritten = now
            return text(state, now, final: false)
        }
    }

    package func end() {
        let now = clock()
        emit { state in
            guard state.open else { return nil }
            state.open = false
            return text(state, now, final: true)
        }
    }

    /// Runs `change` under the lock, then writes what it returned.
    private func emit(_ change: (inout State) -> String?) {
        let written = state.withLock { state -> String? in change(&state) }
        if let written { write(written) }
    }

    /// The seconds left at the phase's pace so far; nil before anything is done or without a total.
    package static func estimate(done: Int, total: Int?, elapsed: Double) -> Double? {
        guard let total, done > 0, elapsed > 0 else { return nil }
        return max(0, Double(total - done)) * elapsed / Double(done)
    }

    /// One line of progress: a JSON object and a newline, or the bar (with `\r` first; a
    /// newline when the phase ends).
    private func text(_ state: State, _ now: Double, final: Bool) -> String {
        let elapsed = max(0, now - state.started)
        let eta = final ? 0 : Self.estimate(done: state.done, total: state.total, elapsed: elapsed)
        switch style {
        case .jsonLines:
            var object: [String: JSONValue] = [
                "event": .string("progress"), "command": .string(command), "phase": .string(state.phase),
                "done": .number(Double(state.done)), "elapsed_s": .number((elapsed * 10).rounded() / 10),
            ]
            if final { object["finished"] = .bool(true) }
            if let total = state.total {
                object["total"] = .number(Double(total))
                object["percent"] = .number(total == 0 ? 100 : (Double(min(state.done, total)) * 1000 / Double(total)).rounded() / 10)
            }
            if let eta { object["eta_s"] = .number(eta.rounded()) }
            return String(decoding: JSONWriter.encode(.object(object)), as: UTF8.self) + "\n"
        case .bar:
            return "\r\u{1B}[2K" + Self.bar(command: command, phase: state.phase, done: state.done, total: state.total, eta: eta) + (final ? "\n" : "")
        }
    }

    /// `encryption rotate · access_tokens [########------------]  120/300  40%  0:04 left`;
    /// without a total, the count alone.
    package static func bar(command: String, phase: String, done: Int, total: Int?, eta: Double?, width: Int = 24) -> String {
        var line = "\(command) · \(phase) "
        guard let total else { return line + "\(done) done" }
        let fraction = total == 0 ? 1 : min(1, Double(done) / Double(total))
        let filled = Int((fraction * Double(width)).rounded(.down))
        line += "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "]"
        line += "  \(done)/\(total)  \(Int((fraction * 100).rounded(.down)))%"
        if let eta {
            let seconds = Int(eta.rounded())
            line += "  " + (seconds >= 3600 ? "\(seconds / 3600):" + pad(seconds / 60 % 60) : "\(seconds / 60)") + ":" + pad(seconds % 60) + " left"
        }
        return line
    }

    private static func pad(_ value: Int) -> String { value < 10 ? "0\(value)" : String(value) }
}
