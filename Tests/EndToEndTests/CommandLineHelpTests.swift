import Foundation
import Testing
import TokenRelayTesting

/// The command line as the README's "Command line" block, `token-relay --help` and each command's
/// `--help` name it (issue 29 item 4): the same commands, sub-commands and options in all three.
/// Runs the built `token-relay`; `--help` needs no configuration.
@Suite("Command-line help agrees with the README")
struct CommandLineHelpTests {
    /// "command" or "command sub-command" → the options its syntax names (`--limit`, ...).
    typealias Syntax = [String: Set<String>]

    /// The commands, sub-commands and options of one syntax text such as
    /// `accounts list [--limit N] [--cursor C] | show ID | delete ID`: alternatives after the first
    /// start with a sub-command of the same command; a sub-command is a lower-case word
    /// (`KEY_ID`, `N`, `<command>` are placeholders).
    static func parse(_ text: String, into syntax: inout Syntax) {
        let alternatives = text.components(separatedBy: " | ")
        guard let command = alternatives.first?.split(separator: " ").first.map(String.init), isWord(command) else { return }
        for (index, alternative) in alternatives.enumerated() {
            let words = alternative.split(separator: " ").map(String.init)
            let sub = index == 0 ? words.dropFirst().first : words.first
            let key = sub.map { isWord($0) ? command + " " + $0 : command } ?? command
            let options = alternative.matches(of: /--[a-z][a-z0-9-]*/).map { String($0.output) }
            syntax[key, default: []].formUnion(options)
        }
    }

    static func isWord(_ text: String) -> Bool { text.wholeMatch(of: /[a-z][a-z0-9-]*/) != nil }

    /// The README's "## Command line" block: each `token-relay …` line up to its `#` comment.
    static func readme() throws -> Syntax {
        let text = try String(contentsOfFile: BuiltProducts.packageRoot() + "/README.md", encoding: .utf8)
        let section = try #require(text.components(separatedBy: "## Command line").dropFirst().first)
        let block = try #require(section.components(separatedBy: "```").dropFirst().first)
        var syntax = Syntax()
        for line in block.split(separator: "\n") where line.hasPrefix("token-relay ") {
            let code = line.dropFirst("token-relay ".count).components(separatedBy: " #").first ?? ""
            parse(code.trimmingCharacters(in: .whitespaces), into: &syntax)
        }
        return syntax
    }

    /// `token-relay --help`: each indented line up to the gap (two spaces or more) before its description.
    static func topLevel(_ help: String) -> Syntax {
        var syntax = Syntax()
        for line in help.split(separator: "\n") where line.hasPrefix("  ") {
            let code = line.trimmingCharacters(in: .whitespaces).components(separatedBy: "  ").first ?? ""
            parse(code, into: &syntax)
        }
        return syntax
    }

    static func help(_ arguments: [String]) async throws -> String {
        let run = try await BuiltProducts.run("token-relay", arguments + ["--help"], environment: [:])
        #expect(run.status == 0, "token-relay \(arguments.joined(separator: " ")) --help: exit \(run.status): \(run.error)")
        return run.output
    }

    @Test("README and token-relay --help name the same commands, sub-commands and options; each --help names its own")
    func helpAgreesWithReadme() async throws {
        let readme = try Self.readme()
        #expect(readme.count >= 20, "the README's block parsed: \(readme.keys.sorted())")
        let topLevel = Self.topLevel(try await Self.help([]))
        for key in Set(readme.keys).union(topLevel.keys).sorted() {
            #expect(readme[key] == topLevel[key], "\(key): README names \(readme[key]?.sorted() ?? []), token-relay --help \(topLevel[key]?.sorted() ?? [])")
        }
        for (key, options) in readme.sorted(by: { $0.key < $1.key }) {
            let words = key.split(separator: " ").map(String.init)
            let own = try await Self.help(words)
            #expect(own.contains("usage: token-relay \(key)"), "token-relay \(key) --help shows its own usage: \(own)")
            for option in options.sorted() {
                #expect(own.contains(option), "token-relay \(key) --help names \(option): \(own)")
            }
            guard words.count == 2 else { continue }
            // The command's own --help names each sub-command with its options.
            let command = try await Self.help([words[0]])
            #expect(command.contains(words[1]), "token-relay \(words[0]) --help names \(words[1]): \(command)")
            for option in options.sorted() {
                #expect(command.contains(option), "token-relay \(words[0]) --help names \(words[1])'s \(option): \(command)")
            }
        }
    }
}
