import Foundation

/// Opens every object and array of a JSON text with Foundation's `JSONDecoder`, for the second
/// looks `JSONBody` takes when `JSONSerialization` (our body reader, ADR 0013) read a text
/// wrongly or refused it: every member passes through the decoder's key decoding strategy
/// (``DuplicateMembers``), and with ``checksNumbers`` in the decoder's user info the walk stops
/// at the first number a `Double` cannot hold, or the first string no Swift `String` holds (a
/// `\u` escape of half a surrogate pair, `"\ud800"`) (``UnreadableMembers``). No parser of our own.
/// Members are visited in sorted order, so that what is named does not depend on hashing.
package struct JSONMemberWalk: Decodable {
    package static let checksNumbers = CodingUserInfoKey(rawValue: "tokenrelay.checksNumbers")!

    /// Thrown by a walk with ``checksNumbers`` at the first number out of range.
    package struct NumberOutOfRange: Error {
        /// The member's dotted path (``dotted(_:)``).
        package let member: String
    }

    /// Thrown by a walk with ``checksNumbers`` at the first string that is not Unicode text: a
    /// `\u` escape of a lone surrogate (RFC 8259 §8.2), which `JSONSerialization` also refuses
    /// the whole text for.
    package struct StringNotUnicode: Error {
        /// The member's dotted path (``dotted(_:)``).
        package let member: String
    }

    package init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: MemberKey.self) {
            for key in object.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) { _ = try object.decode(Self.self, forKey: key) }
        } else if var array = try? decoder.unkeyedContainer() {
            while !array.isAtEnd { _ = try array.decode(Self.self) }
        } else if decoder.userInfo[Self.checksNumbers] != nil {
            // Neither null, a Boolean nor a string is a number: out of range when no Double reads it.
            // A string the decoder cannot read (a lone surrogate escape) is not a number: it is
            // refused as a string, not a type mismatch.
            let value = try decoder.singleValueContainer()
            guard !value.decodeNil(), (try? value.decode(Bool.self)) == nil else { return }
            do {
                _ = try value.decode(String.self)
                return
            } catch DecodingError.typeMismatch {
                // Not a string: a number.
            } catch {
                throw StringNotUnicode(member: Self.dotted(decoder.codingPath))
            }
            if (try? value.decode(Double.self)) == nil {
                throw NumberOutOfRange(member: Self.dotted(decoder.codingPath))
            }
        }
    }

    /// A member's path with dots: `scopes`, `claims.access_token`, `items.0.name`.
    package static func dotted(_ path: [any CodingKey]) -> String {
        path.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
    }

    package struct MemberKey: CodingKey {
        package let stringValue: String
        package let intValue: Int?
        package init(stringValue: String) { (self.stringValue, self.intValue) = (stringValue, nil) }
        package init?(intValue: Int) { (self.stringValue, self.intValue) = (String(intValue), intValue) }
    }
}

/// Finds a number too large for a `Double` (`1e400`, a 400-digit integer), or a string value
/// holding a lone surrogate escape (`"\ud800"`), for which `JSONSerialization` refuses the whole
/// text, so that the answer names the member (behaviour §4.5) instead of calling the body "not
/// valid JSON". `JSONBody` calls this only after such a refusal, and only for text whose every
/// token RFC 8259 allows (``JSONTokenFaults``): the walk cannot tell a string its decoder refuses
/// for a lone surrogate from one refused for a raw control character, nor a number out of range
/// from text that is no number (`1.`).
package enum UnreadableMembers {
    /// What is wrong with the member ``first(in:)`` names.
    package enum Fault: Equatable {
        case numberOutOfRange
        case stringNotUnicode
    }

    /// The dotted path (``JSONMemberWalk/dotted(_:)``) of the first member, in sorted order, whose
    /// number is out of range or whose string is not Unicode text, with which of the two; nil
    /// when there is none, when the value is the whole text, or when `JSONDecoder` cannot read
    /// `bytes` either.
    package static func first(in bytes: [UInt8]) -> (member: String, fault: Fault)? {
        let decoder = JSONDecoder()
        decoder.userInfo[JSONMemberWalk.checksNumbers] = true
        do {
            _ = try decoder.decode(JSONMemberWalk.self, from: Data(bytes))
        } catch let error as JSONMemberWalk.NumberOutOfRange {
            return error.member.isEmpty ? nil : (error.member, .numberOutOfRange)
        } catch let error as JSONMemberWalk.StringNotUnicode {
            return error.member.isEmpty ? nil : (error.member, .stringNotUnicode)
        } catch {}
        return nil
    }
}
