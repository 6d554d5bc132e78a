export { clientApp } from "./client-app.ts";
export { adminApp, pauseLeaseMsMax, pauseLeaseMsMin } from "./admin-app.ts";
export { listen, type BoundServer } from "./server.ts";
export { InFlightBytes } from "./in-flight.ts";
export { requestBodyBytesMax } from "./body.ts";
export { HttpSecurity } from "./security.ts";
export { createToken, isHashPrefix, isRole, listTokens, revokeTokens, roles, TokenSet, type Role, type TokenListing } from "./tokens.ts";
export { routeAccess } from "./access.ts";
export { loadTlsMaterial } from "./tls.ts";
