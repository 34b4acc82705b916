import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension Process {
    /// Waits for the child to exit and returns its status: the exit code, or the number of the
    /// signal that ended it (as Foundation's `terminationStatus`). A child still running after
    /// `timeoutSeconds` is killed (SIGKILL) and its signal returned; -1 if even that is not seen.
    ///
    /// Used instead of `waitUntilExit`: Foundation's Process sometimes never notices a child's
    /// exit (the child stays a zombie and `isRunning` stays true), and `waitUntilExit` then
    /// blocks its thread forever; on the two-thread cooperative pool two such waits stalled
    /// every test of a run (seen in a fresh Debian root). Here the child is reaped with
    /// `waitpid(WNOHANG)` unless Foundation reaped it first, in a bounded loop.
    /// `describing` is added to the line reporting a kill (e.g. where the child's log is).
    public func reapExitStatus(timeoutSeconds: Double = 60, describing: String = "") -> Int32 {
        if let status = reapedStatus(until: Date().addingTimeInterval(timeoutSeconds)) { return status }
        FileHandle.standardError.write(Data("Process: pid \(processIdentifier) did not exit within \(timeoutSeconds) s; killed \(describing)\n".utf8))
        kill(processIdentifier, SIGKILL)
        return reapedStatus(until: Date().addingTimeInterval(10)) ?? -1
    }

    private func reapedStatus(until deadline: Date) -> Int32? {
        let pid = processIdentifier
        while true {
            if !isRunning { return terminationStatus }
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                // The <sys/wait.h> macros are not imported: low 7 bits are the signal, 0 for an exit.
                let signal = status & 0x7f
                return signal == 0 ? (status >> 8) & 0xff : signal
            }
            guard Date() < deadline else { return nil }
            usleep(10_000)
        }
    }
}
