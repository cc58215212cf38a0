/// The elements the scanner is inside, innermost last, with their names as
/// a stack of bytes (pushing an element appends its name, popping drops it),
/// where each start tag was (for errors), and nothing else. A value type the
/// scanner mutates with one call per start or end tag.
struct ExportElementStack {
    struct Element {
        /// The name: `nameCount` bytes at `nameStart` of `names`.
        var nameStart: Int
        var nameCount: Int
        var position: ExportXMLPosition
    }

    /// What closing an element by name found.
    enum Close {
        /// The innermost element had the name and is closed; `depth` remain open.
        case closed(depth: Int)
        /// The innermost element has another name. `outerHasName`: an outer
        /// element has it (the ones inside it were never closed).
        case mismatch(innermost: Element, outerHasName: Bool)
        /// Nothing is open.
        case empty
    }

    private(set) var elements: [Element] = []
    private var names: [UInt8] = []

    init() {
        elements.reserveCapacity(64)
        names.reserveCapacity(1024)
    }

    var depth: Int { elements.count }
    var innermost: Element? { elements.last }

    mutating func push(name: UnsafePointer<UInt8>, count: Int, at position: ExportXMLPosition) {
        elements.append(Element(nameStart: names.count, nameCount: count, position: position))
        names.append(contentsOf: UnsafeBufferPointer(start: name, count: count))
    }

    /// Closes the innermost element if its name is the `count` bytes at `name`.
    mutating func close(name: UnsafePointer<UInt8>, count: Int) -> Close {
        guard let top = elements.last else { return .empty }
        if matches(top, name, count) {
            elements.removeLast()
            names.removeLast(count)
            return .closed(depth: elements.count)
        }
        return .mismatch(innermost: top, outerHasName: elements.dropLast().contains { matches($0, name, count) })
    }

    func name(of element: Element) -> String {
        String(decoding: names[element.nameStart..<(element.nameStart + element.nameCount)], as: UTF8.self)
    }

    private func matches(_ element: Element, _ name: UnsafePointer<UInt8>, _ count: Int) -> Bool {
        element.nameCount == count
            && names.withUnsafeBufferPointer { memcmp($0.baseAddress! + element.nameStart, name, count) == 0 }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
