/** Version of this package (the same as package.json's; a test keeps them equal). */
export const VERSION = "0.1.0";
