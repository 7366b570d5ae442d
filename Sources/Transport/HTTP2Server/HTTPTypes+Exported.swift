// The HTTP types every end shares (HTTPField, HTTPHeaders, HTTPMethod, HTTPClientError) come with this module.
@_exported import HTTPTypes
