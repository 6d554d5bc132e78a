// The one rule for an object-store location, s3://BUCKET/PREFIX: config/ checks a location
// from the configuration or a command line against it, backup/ parses one with it, so the two
// cannot come to disagree about which text names a bucket.

/** s3://, the bucket (group 1), then /PREFIX (group 2) or nothing. */
export const OBJECT_URL_PATTERN = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/;

/** The bucket rule the pattern holds, in the words a message gives it. */
export const OBJECT_BUCKET_RULE = "a bucket name of 3 to 63 lower-case letters, digits, dots and hyphens";
