import Crypto
import Foundation

/// SHA-256 through swift-crypto, wrapped so callers need not import Crypto.
enum SHA256Digest {
    static func of<D: DataProtocol>(_ data: D) -> [UInt8] {
        Array(SHA256.hash(data: data))
    }
}

/// An incremental SHA-256, for hashing files while streaming them.
public struct StreamingSHA256 {
    private var hasher = SHA256()
    public init() {}
    public mutating func update<D: DataProtocol>(_ data: D) { hasher.update(data: data) }
    public mutating func update(bytes: UnsafeRawBufferPointer) { hasher.update(bufferPointer: bytes) }
    public func finalizeHex() -> String { Hashing.hex(hasher.finalize()) }
}
