import TokenRelayTesting

/// Three `token-relay` replicas on one database through a real pgbouncer in transaction mode,
/// LISTEN on the direct connection (``ReplicaTests/stackBehindPgBouncer(name:poolSize:environment:emulatorArguments:)``):
/// the first is the stack's own, the two others share its emulator and settings.
struct ThreeReplicas {
    let stack: TokenRelayStack
    let bouncer: PgBouncer
    let second: ManagedProcess
    let third: ManagedProcess

    /// The three replicas' base URLs, the stack's first.
    var bases: [String] { [stack.baseURL, second.baseURL, third.baseURL] }

    static func start(name: String, poolSize: Int = 5, environment: [String: String] = [:], emulatorArguments: [String] = []) async throws
        -> ThreeReplicas
    {
        let (stack, bouncer) = try await ReplicaTests.stackBehindPgBouncer(
            name: name, poolSize: poolSize, environment: environment, emulatorArguments: emulatorArguments)
        do {
            let second = try await stack.startReplica()
            do {
                return ThreeReplicas(stack: stack, bouncer: bouncer, second: second, third: try await stack.startReplica())
            } catch {
                second.stop()
                throw error
            }
        } catch {
            stack.stop()
            bouncer.stop()
            throw error
        }
    }

    /// Stops the replicas, then pgbouncer.
    func stop() {
        third.stop()
        second.stop()
        stack.stop()
        bouncer.stop()
    }
}
