import Foundation

extension Metrics {
    /// `tokenrelay_build_info` and the standard `process_*` families (the names and units of the
    /// Prometheus client libraries' process collector, read from `/proc/self` at each scrape), so
    /// the same dashboards and alerts work for this process as for any other (behaviour §8.2).
    package func describeProcess() {
        describe("tokenrelay_build_info", "gauge", "Always 1; the labels say which build runs (version, commit, release_id as in /healthz).")
        set("tokenrelay_build_info", ["version": BuildInfo.version, "commit": BuildInfo.commit, "release_id": BuildInfo.releaseId], value: 1)
        describe("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.")
        describe("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
        describe("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
        describe("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.")
        describe("process_open_fds", "gauge", "Number of open file descriptors.")
        describe("process_max_fds", "gauge", "Maximum number of open file descriptors.")
        addGauges { ProcessStatistics.read()?.samples ?? [] }
    }
}

/// What `/proc` says of this process (Linux only; nil elsewhere or when `/proc` is not mounted).
package struct ProcessStatistics: Sendable, Equatable {
    package var cpuSeconds: Double
    package var residentBytes: Double
    package var virtualBytes: Double
    package var startTimeSeconds: Double
    package var openFileDescriptors: Double
    package var maxFileDescriptors: Double

    package var samples: [(name: String, labels: [String: String], value: Double)] {
        [
            ("process_cpu_seconds_total", [:], cpuSeconds), ("process_resident_memory_bytes", [:], residentBytes),
            ("process_virtual_memory_bytes", [:], virtualBytes), ("process_start_time_seconds", [:], startTimeSeconds),
            ("process_open_fds", [:], openFileDescriptors), ("process_max_fds", [:], maxFileDescriptors),
        ]
    }

    /// Reads `/proc/self/stat`, `/proc/stat` (boot time), `/proc/self/fd` and the descriptor limit.
    package static func read() -> ProcessStatistics? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let system = try? String(contentsOfFile: "/proc/stat", encoding: .utf8)
        else { return nil }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        var limit = rlimit()
        let maxFds = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Double(limit.rlim_cur) : 0
        return parse(
            stat: stat, procStat: system, openFileDescriptors: fds, maxFileDescriptors: maxFds, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))),
            pageSize: Double(sysconf(Int32(_SC_PAGESIZE))))
    }

    /// The fields of `/proc/[pid]/stat` (proc(5)): after the command in parentheses (which may hold
    /// spaces and parentheses itself), field 3 is the state; utime 14, stime 15, starttime 22
    /// (clock ticks after boot), vsize 23 (bytes), rss 24 (pages). Boot time is `btime` of `/proc/stat`.
    package static func parse(
        stat: String, procStat: String, openFileDescriptors: Int, maxFileDescriptors: Double, ticksPerSecond: Double, pageSize: Double
    ) -> ProcessStatistics? {
        guard let close = stat.lastIndex(of: ")"), ticksPerSecond > 0 else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): field n is fields[n - 3].
        func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
        guard let utime = field(14), let stime = field(15), let start = field(22), let vsize = field(23), let rss = field(24),
            let bootLine = procStat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Double(bootLine.dropFirst(6).trimmingCharacters(in: .whitespaces))
        else { return nil }
        return ProcessStatistics(
            cpuSeconds: (utime + stime) / ticksPerSecond, residentBytes: rss * pageSize, virtualBytes: vsize,
            startTimeSeconds: boot + start / ticksPerSecond, openFileDescriptors: Double(openFileDescriptors), maxFileDescriptors: maxFileDescriptors)
    }
}
