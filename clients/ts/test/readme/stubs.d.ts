// What the README's host-platform example assumes the host has; test.sh
// type-checks the example (extracted from README.md) against the package.
declare const CLIENT_TOKEN: string;
declare const currentUser: { id: string };
declare function showReaction(emoji: string, targetSeq?: number): void;
declare function confirmDialog(title: string, input: unknown): Promise<boolean>;
declare function drawComponent(url: string, tagName: string, props: unknown): void;
declare function drawIframe(url: string, props: unknown): void;
declare function toast(text: string): void;
declare const palette: {
  onOpen(f: () => void): void;
  show(caps: import("../../src/index.js").Capability[]): void;
  onPick(f: (cap: import("../../src/index.js").Capability, input: unknown) => Promise<void>): void;
};
