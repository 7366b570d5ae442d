// The HTTP types both ends share (HTTPMethod, HTTPHeaders) come with this module.
@_exported import HTTPTypes
