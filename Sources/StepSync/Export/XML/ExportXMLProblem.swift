/// What is wrong with an export's XML structure (`ExportError.malformedXML`),
/// typed so that callers and tests can match on it; `description` is the
/// phrase after the position in the error's one line.
public enum ExportXMLProblem: Sendable, Equatable, CustomStringConvertible {
    /// An end tag whose name is not that of any open element.
    case strayEndTag(name: String, openElement: String, openLine: Int)
    /// An element left open when an end tag closed one of its ancestors: the
    /// error's position is this element's start tag.
    case unclosedElement(name: String, closedBy: String, closedAtLine: Int)
    /// An attribute value whose closing quote is missing: the value runs into
    /// the next tag (a `<` is never allowed inside a value).
    case unterminatedAttributeValue(attribute: String, element: String)
    /// A `<` inside a tag that no single attribute explains.
    case lessThanInTag(element: String)
    /// `</name` not followed by optional whitespace and `>`.
    case malformedEndTag(name: String)
    /// Something other than whitespace, comments and processing
    /// instructions after the root element's end tag (`what`: "<Record>",
    /// "end tag </Record>", "text").
    case contentAfterRoot(what: String, rootClosedAtLine: Int)

    public var description: String {
        switch self {
        case let .strayEndTag(name, open, line):
            return "stray end tag </\(name)> (the open element is <\(open)> from line \(line))"
        case let .unclosedElement(name, closedBy, line):
            return "<\(name)> is never closed (</\(closedBy)> at line \(line) closes an element around it)"
        case let .unterminatedAttributeValue(attribute, element):
            return "the quote opened by \(attribute)= in <\(element)> is never closed (the value runs into the next tag)"
        case let .lessThanInTag(element):
            return "'<' inside the <\(element)> tag (a missing quote or '>')"
        case let .malformedEndTag(name):
            return "end tag </\(name) is not closed by '>'"
        case let .contentAfterRoot(what, line):
            return "\(what) after the root element ended at line \(line)"
        }
    }
}
